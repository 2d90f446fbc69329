"""InputSnapshot: the first step; fingerprints the input for KFP's cache key."""
