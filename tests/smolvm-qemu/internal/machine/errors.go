package machine

import "fmt"

// Errors print like smolvm 1.0.4's error variants (crate `smolvm::Error`),
// so callers that match on their text see the same words.

func configError(op, reason string) error {
	return fmt.Errorf("config operation failed: %s: %s", op, reason)
}

func agentError(op string, err error) error {
	return fmt.Errorf("agent operation failed: %s: %w", op, err)
}

func notFound(name string) error { return fmt.Errorf("vm not found: %s", name) }

func invalidState(expected, actual string) error {
	return fmt.Errorf("invalid vm state: expected %s, got %s", expected, actual)
}

func storageError(op string, err error) error {
	return fmt.Errorf("storage operation failed: %s: %w", op, err)
}
