../etc/passwd
