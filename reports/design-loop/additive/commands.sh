fitrules predict --form composition --at H=64,keep=0.6666666666666666 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form additive --at H=64,keep=0.6666666666666666 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form composition --at H=2,keep=0.5 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form additive --at H=2,keep=0.5 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form composition --at H=2,keep=1.0 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form additive --at H=2,keep=1.0 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form composition --at H=32,keep=1.0 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form additive --at H=32,keep=1.0 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form composition --at H=2,keep=0.6666666666666666 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form additive --at H=2,keep=0.6666666666666666 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form composition --at H=64,keep=0.36602540378443865 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form additive --at H=64,keep=0.36602540378443865 --ledger reports/design-loop/additive/ledger.jsonl
fitrules simulate reports/design-loop/additive/runs.toml --out reports/design-loop/additive/runs.csv --jobs 2
fitrules score --ledger reports/design-loop/additive/ledger.jsonl --data reports/design-loop/additive/runs.csv
