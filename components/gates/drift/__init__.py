"""DataDriftGate: new data against the data that trained the model being served."""
