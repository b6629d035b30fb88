"""The local training loop: settings (:mod:`.config`), data and rollouts (:mod:`.data`, :mod:`.rollout`,
:mod:`.scoring`), the trainable policy and its sequence layouts (:mod:`.policy`, :mod:`.sequences`,
:mod:`.packing`), the trainer (:mod:`.trainer`) and the evaluation of its checkpoints (:mod:`.evaluate`)."""
