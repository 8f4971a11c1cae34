// Package tests holds the repository-wide checks and the end-to-end tests.
// They build and drive the real binaries through their command lines only.
package tests
