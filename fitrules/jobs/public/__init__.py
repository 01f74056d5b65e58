"""Each job's Python function, one module a job: its checks of what a user gives and its call
of the job's runner; :mod:`fitrules.api` re-exports them and the command line calls them."""
