"""What a training run keeps on disk and on screen: resumable checkpoints and the metrics log
(:mod:`.checkpoint`), the recorded environment of each (re)start (:mod:`.reproducible`) and the progress
line (:mod:`.progress`)."""

RESUME_TRAINING = "rerun the same command to resume from the last checkpoint"
"""How a stopped or failed training run says it resumes (dare-train's last line)."""
