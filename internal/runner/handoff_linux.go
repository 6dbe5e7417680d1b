package runner

// The warm runner makes itself non-dumpable before it serves, as Run does
// before a command starts.
func init() { shieldServe = shieldRunner }
