"""The service's routes, one module per group; ``pipeline.serve.app`` includes them."""
