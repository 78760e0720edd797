"""What a chain is: the chain file, its model, settings, graph, parameters, matrix and frozen form."""
