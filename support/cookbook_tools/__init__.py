"""Tools around the cookbook that no notebook imports: running the notebooks headlessly (`notebooks`), the demo
(`python -m cookbook_tools.demo`) and its HTML gallery (`gallery`)."""
