package testenv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
)

// FreeAddr returns a loopback address whose port nobody listens on, for a child process to
// bind. The port is taken below the kernel's ephemeral range: a port picked with :0 and closed
// again can be handed to the next socket that asks for :0 or connects out (a control plane
// starting, another test package) before the child binds it, and packages run in parallel.
func FreeAddr() (string, error) {
	const floor = 10000
	low := ephemeralLow()
	if low-floor < 1000 {
		return pickEphemeral()
	}
	for range 200 {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", floor+rand.IntN(low-floor)))
		if err != nil {
			continue // taken
		}
		addr := l.Addr().String()
		return addr, l.Close()
	}
	return "", errors.New("no free port below the ephemeral range")
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's default elsewhere).
func ephemeralLow() int {
	low, high := 32768, 60999
	if raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		_, _ = fmt.Sscan(string(raw), &low, &high)
	}
	return low
}

func pickEphemeral() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}
