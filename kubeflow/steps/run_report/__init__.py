"""RunReport: the last step; the HTML run report and the KFP UI's metrics."""
