"""DataValidationGate: stops the run when ExampleValidator found anomalies."""
