# Remake the committed grids (about 40 minutes on 2 cores; a grid whose CSV exists is kept:
# delete it to remake it) and the committed reports.
PY ?= python
JOBS ?= 2
GRIDS = main wide workers variants paired smoke tuned paired_tuned quadratic quadratic_attack

# the transformer's grids need the gpt extra (pip install ".[gpt]"); gpt_tuned's outer step is
# the one the tune job chose on gpt_tuning's runs (python -m tools.gpt_report checks it)
GPT_GRIDS = gpt gpt_attack gpt_tuning gpt_tuned gpt_tuned_attack

grids: $(GRIDS:%=data/%.csv)

gpt-grids: $(GPT_GRIDS:%=data/%.csv)

data/%.csv: data/specs/%.toml
	fitrules simulate $< --out $@ --jobs $(JOBS)

reports:
	$(PY) -m tools.rebuild

.PHONY: grids gpt-grids reports
