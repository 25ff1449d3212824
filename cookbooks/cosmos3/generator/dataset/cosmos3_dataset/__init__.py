"""The dataset family's own code, beside its notebooks: a spec expanded into jobs with stable ids (`dataset_spec`)
and the resumable folder the jobs are written into (`dataset_folder`). What other families share is in `helpers`."""
