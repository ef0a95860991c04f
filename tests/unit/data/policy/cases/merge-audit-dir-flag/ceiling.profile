open
