"""Preference data for DPO / VRPO: the pairs and their batches (:mod:`.pairs`) and the builder of the shipped
pair files (:mod:`.build`, ``python -m dare.trainers.preference.build``)."""
