"""What two or more of the cookbook's families share: settings and SPEED, prompts, media, runs, display, errors.
Each family's own code sits beside its notebooks (`cosmos3_<family>`).

Importing this package has no side effects: nothing is loaded, downloaded or read from the environment
until a function is called. Heavy dependencies (torch, diffusers) are imported inside the modules that need them.
"""

__version__ = "0.1.0"
