"""The audiovisual family's own code, beside its notebooks: the modes `MODES` names, with each mode's bundled
conditioning (`modes`), a long video's chunks (`long_video`) and the checks the Diffusers notebook makes of its loaded
pipeline (`diffusers_pipe`). What other families share is in `helpers`."""
