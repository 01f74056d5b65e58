# Remake the committed grids (about 40 minutes on 2 cores; a grid whose CSV exists is kept:
# delete it to remake it) and the committed reports.
PY ?= python
JOBS ?= 2
GRIDS = main wide workers variants paired smoke tuned paired_tuned quadratic quadratic_attack

grids: $(GRIDS:%=data/%.csv)

data/%.csv: data/specs/%.toml
	fitrules simulate $< --out $@ --jobs $(JOBS)

reports:
	$(PY) -m tools.rebuild

.PHONY: grids reports
