"""A module whose import starts JAX's CPU backend (test_warmup preloads it:
warm-up must then not fork this process)."""

import jax.numpy as jnp

jnp.ones(1).block_until_ready()
