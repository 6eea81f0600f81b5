package server

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Limits bound what callers can ask of the server. Zero fields take the
// defaults documented on each.
type Limits struct {
	// MaxConnectionAge closes a connection (after its calls finish, within a
	// grace of a minute) once it is this old, so clients reconnect: to
	// another replica, and with the server's current certificate. 0 means
	// 30 minutes.
	MaxConnectionAge time.Duration
}

func (l *Limits) fill() {
	if l.MaxConnectionAge <= 0 {
		l.MaxConnectionAge = 30 * time.Minute
	}
}

// serverOptions are the grpc.Server options enforcing l.
func (l Limits) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionAge:      l.MaxConnectionAge,
			MaxConnectionAgeGrace: time.Minute,
		}),
	}
}
