package server

import (
	"errors"
	"net"

	"google.golang.org/grpc"
)

// ServeHealth serves grpc.health.v1.Health alone on lis, plaintext and
// without interceptors, until Shutdown. Kubernetes' native gRPC probes
// speak neither TLS nor bearer tokens, so they cannot reach the main
// listener once it is secured; this one tells them the same statuses and
// nothing else.
func (s *Server) ServeHealth(lis net.Listener) error {
	err := s.probes.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}
