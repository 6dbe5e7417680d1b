package agent

// RequestKey is the key of the nth command a chat of messages asks for.
func RequestKey(messages []Message, n int, command, skill string) string {
	return requestKey(conversationHash(messages), n, command, skill)
}

// RunName is the name of the CommandRun that key files for agent.
func RunName(agent, key string) string { return runName(agent, key) }
