"""A numpy stand-in for Brax (google/brax) with the API surface crl's brax backend uses: brax.envs."""
__version__ = '0.10.5+crl.fake'
