fitrules predict --data data/gpt.csv --where 'algo == '"'"'diloco'"'"'' --form composition --at H=4,keep=0.6666666666666666 --runs 3 --ledger design.jsonl
fitrules predict --data data/gpt.csv --where 'algo == '"'"'diloco'"'"'' --form additive --at H=4,keep=0.6666666666666666 --runs 3 --ledger design.jsonl
fitrules predict --data data/gpt.csv --where 'algo == '"'"'diloco'"'"'' --form composition --at H=32,keep=0.25 --runs 3 --ledger design.jsonl
fitrules predict --data data/gpt.csv --where 'algo == '"'"'diloco'"'"'' --form additive --at H=32,keep=0.25 --runs 3 --ledger design.jsonl
fitrules predict --data data/gpt.csv --where 'algo == '"'"'diloco'"'"'' --form composition --at H=64,keep=0.36602540378443865 --runs 3 --ledger design.jsonl
fitrules predict --data data/gpt.csv --where 'algo == '"'"'diloco'"'"'' --form additive --at H=64,keep=0.36602540378443865 --runs 3 --ledger design.jsonl
fitrules predict --data data/gpt.csv --where 'algo == '"'"'diloco'"'"'' --form composition --at H=4,keep=0.36602540378443865 --runs 3 --ledger design.jsonl
fitrules predict --data data/gpt.csv --where 'algo == '"'"'diloco'"'"'' --form additive --at H=4,keep=0.36602540378443865 --runs 3 --ledger design.jsonl
fitrules simulate reports/gpt/design/runs.toml --out design_runs.csv --jobs 2
fitrules score --ledger design.jsonl --data design_runs.csv
