"""The service's routes, one module per group; ``specrag.serve.app`` includes them."""
