# Put first on PYTHONPATH by the tests of `--report` without matplotlib: it hides the installed
# matplotlib, as a machine without python3-matplotlib would have none.
raise ImportError("No module named 'matplotlib'")
