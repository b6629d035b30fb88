"""The verl bridge: our algorithm plugins on verl's single controller (Ray worker groups, DataProto, FSDP2).

``dare-train --engine verl`` builds :class:`~.trainer.VerlTrainer`. Nothing here is imported by the core
install: it needs the ``rl`` extra (verl 0.9.x and Ray).
"""
