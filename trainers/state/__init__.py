"""What a training run keeps on disk and on screen: resumable checkpoints and the metrics log
(:mod:`.checkpoint`), the recorded environment of each (re)start (:mod:`.reproducible`) and the progress
line (:mod:`.progress`)."""
