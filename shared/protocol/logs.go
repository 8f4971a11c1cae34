package protocol

// DefaultLogLines is how many lines of a log every `logs` prints unless
// told otherwise (-n): the host's logs, executor logs and the agent's logs
// verb share it.
const DefaultLogLines = 100
