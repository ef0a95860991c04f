locked
