"""Model architectures, decoders and engines. Registered with the harness through ``backends.plugin``."""
