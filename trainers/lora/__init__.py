"""LoRA: the backend interface and registry (:mod:`.backend`), the dependency-free implementation
(:mod:`.builtin`) and the Hugging Face peft one (:mod:`.peft`, imported lazily)."""
