package agent

import "time"

// Shortened is c with every deadline capped at d and every idle deadline
// at d/2, so that the matrix's hung boxes end in seconds.
func Shortened(c *Client, d time.Duration) *Client {
	c.shorten = d
	return c
}
