// Package relay runs hermes-box-agent verbs inside the box and carries their
// streams back to the host.
//
// One call is one agent process. The host writes a protocol.Request line and
// then any input bytes on the process's stdin, copies its stdout to the
// caller, decodes its stderr as JSON Lines events, and returns its exit
// status. SSH is the transport once the box's sshd runs: it dials with the
// project key, accepts only the pinned host key, and runs one fixed remote
// command, so no shell ever parses the request.
package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// Transport runs one agent verb. stdin (may be nil) is streamed after the
// request line and closed at its EOF; stdout (may be nil) receives the verb's
// data; onEvent (may be nil) receives the agent's events in order, from one
// goroutine, all before Run returns. The exit code is the verb's; it is
// meaningful only when err is nil.
type Transport interface {
	Run(ctx context.Context, req protocol.Request, stdin io.Reader, stdout io.Writer, onEvent func(protocol.Event)) (exitCode int, err error)
}

// DefaultDialTimeout bounds the TCP connect and the SSH handshake when
// SSH.DialTimeout is zero.
const DefaultDialTimeout = 15 * time.Second

// ErrHostKeyMismatch is wrapped by dial errors when the server presented a
// key other than the pinned one.
var ErrHostKeyMismatch = errors.New("host key does not match the pinned key")

// ErrAuthRefused is wrapped by dial errors when sshd answered but refused
// the project key (on a box that sshd's checks lock out, such as an
// authorized_keys file someone else owns, waiting does not help).
var ErrAuthRefused = errors.New("the box's sshd refused the project key")

// SSH is the transport over the box's sshd. Every Run opens and closes its own
// connection; use Dial for a Client that runs several calls on one.
type SSH struct {
	// Addr is host:port of the box's sshd, e.g. "127.0.0.1:2222".
	Addr string
	// User is the login user, e.g. "boxadmin".
	User string
	// Signer is the project key; it is the only authentication offered.
	Signer ssh.Signer
	// HostKey is the pinned host key; any other key fails the handshake.
	HostKey ssh.PublicKey
	// Command is the remote command; empty means boxlayout.RelayCommand.
	Command string
	// DialTimeout bounds connect plus handshake; zero means DefaultDialTimeout.
	DialTimeout time.Duration
}

var _ Transport = (*SSH)(nil)

// Run implements Transport on a connection of its own. Cancelling ctx closes
// that connection, which ends the call promptly.
func (s *SSH) Run(ctx context.Context, req protocol.Request, stdin io.Reader, stdout io.Writer, onEvent func(protocol.Event)) (int, error) {
	// A bad request fails before anything touches the network.
	if err := req.Validate(); err != nil {
		return -1, fmt.Errorf("relaying to %s: %w", s.Addr, err)
	}
	c, err := s.Dial(ctx)
	if err != nil {
		return -1, err
	}
	defer c.Close()
	return c.Run(ctx, req, stdin, stdout, onEvent)
}

// Dial connects and authenticates. The host key is checked during the key
// exchange, before authentication, so a wrong key fails before any session
// exists or any byte of a request is sent. ctx bounds the dial only.
func (s *SSH) Dial(ctx context.Context) (*Client, error) {
	config, err := s.clientConfig()
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", s.Addr, err)
	}
	timeout := s.DialTimeout
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := net.Dialer{}
	conn, err := d.DialContext(ctx, "tcp", s.Addr)
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", s.Addr, err)
	}
	// The handshake does not watch ctx: closing the socket stops it.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	pump := newAckPump(conn)
	sshConn, chans, reqs, err := ssh.NewClientConn(pump, s.Addr, config)
	if !stop() {
		if err == nil {
			sshConn.Close()
		}
		return nil, fmt.Errorf("dialing %s: %w", s.Addr, context.Cause(ctx))
	}
	if err != nil {
		conn.Close()
		// x/crypto/ssh has no typed error for a refused key.
		if strings.Contains(err.Error(), "unable to authenticate") {
			return nil, fmt.Errorf("dialing %s: %w: %w", s.Addr, ErrAuthRefused, err)
		}
		return nil, fmt.Errorf("dialing %s: %w", s.Addr, err)
	}
	command := s.Command
	if command == "" {
		command = boxlayout.RelayCommand
	}
	pump.start(sshConn)
	return &Client{conn: ssh.NewClient(sshConn, chans, reqs), addr: s.Addr, command: command, pump: pump}, nil
}

// clientConfig allows exactly one authentication method, the project key,
// and exactly the pinned host key.
func (s *SSH) clientConfig() (*ssh.ClientConfig, error) {
	switch {
	case s.Addr == "":
		return nil, errors.New("no address")
	case s.User == "":
		return nil, errors.New("no user")
	case s.Signer == nil:
		return nil, errors.New("no client key")
	case s.HostKey == nil:
		return nil, errors.New("no pinned host key; refusing to connect")
	}
	pinned := s.HostKey
	fixed := ssh.FixedHostKey(pinned)
	return &ssh.ClientConfig{
		User: s.User,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(s.Signer)},
		HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			if err := fixed(hostname, remote, key); err != nil {
				return fmt.Errorf("%w: server offered %s %s, pinned %s %s", ErrHostKeyMismatch,
					key.Type(), ssh.FingerprintSHA256(key), pinned.Type(), ssh.FingerprintSHA256(pinned))
			}
			return nil
		},
		HostKeyAlgorithms: hostKeyAlgorithms(pinned),
	}, nil
}

// hostKeyAlgorithms asks only for the pinned key's algorithm, so a server
// holding several host keys presents the pinned one.
func hostKeyAlgorithms(key ssh.PublicKey) []string {
	if key.Type() == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}
	}
	return []string{key.Type()}
}
