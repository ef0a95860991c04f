site-team
