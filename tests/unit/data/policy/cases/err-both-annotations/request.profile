agent
