fitrules predict --form composition --at H=64,keep=0.6666666666666666 --runs 3 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form additive --at H=64,keep=0.6666666666666666 --runs 3 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form composition --at H=1,keep=0.6666666666666666 --runs 3 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form additive --at H=1,keep=0.6666666666666666 --runs 3 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form composition --at H=64,keep=0.36602540378443865 --runs 3 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form additive --at H=64,keep=0.36602540378443865 --runs 3 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form composition --at H=64,keep=0.0889129881342269 --runs 3 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form additive --at H=64,keep=0.0889129881342269 --runs 3 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form composition --at H=2,keep=1.0 --runs 3 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form additive --at H=2,keep=1.0 --runs 3 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form composition --at H=2,keep=0.6666666666666666 --runs 3 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form additive --at H=2,keep=0.6666666666666666 --runs 3 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form composition --at H=32,keep=1.0 --runs 3 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form additive --at H=32,keep=1.0 --runs 3 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form composition --at H=2,keep=0.0625 --runs 3 --ledger reports/design-loop/additive/ledger.jsonl
fitrules predict --form additive --at H=2,keep=0.0625 --runs 3 --ledger reports/design-loop/additive/ledger.jsonl
fitrules simulate reports/design-loop/additive/runs.toml --out reports/design-loop/additive/runs.csv --jobs 2
fitrules score --ledger reports/design-loop/additive/ledger.jsonl --data reports/design-loop/additive/runs.csv
