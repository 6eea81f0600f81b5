package main

import (
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/grpcclient"
)

// clients are the stubs of every service the workload calls, on one connection.
type clients struct {
	conn      *grpc.ClientConn
	single    metadatav1.SingleImageMetadataServiceClient
	pano      metadatav1.PanoImageMetadataServiceClient
	preStitch metadatav1.PreStitchImageMetadataServiceClient
	retention metadatav1.RetentionServiceClient
	health    healthpb.HealthClient
}

// dialAll makes n connections (n grpc.ClientConns, each its own HTTP/2
// connection). grpc-go carries every call of a connection through that
// connection's one reader and one writer goroutine, so one connection
// serializes the tool's calls, and the server's for that connection.
func dialAll(c grpcclient.Config, n int) ([]*clients, error) {
	var all []*clients
	for range n {
		cl, err := dial(c)
		if err != nil {
			closeAll(all)
			return nil, err
		}
		all = append(all, cl)
	}
	return all, nil
}

func closeAll(all []*clients) {
	for _, cl := range all {
		_ = cl.conn.Close()
	}
}

func dial(c grpcclient.Config) (*clients, error) {
	conn, err := c.Dial()
	if err != nil {
		return nil, err
	}
	return &clients{
		conn:      conn,
		single:    metadatav1.NewSingleImageMetadataServiceClient(conn),
		pano:      metadatav1.NewPanoImageMetadataServiceClient(conn),
		preStitch: metadatav1.NewPreStitchImageMetadataServiceClient(conn),
		retention: metadatav1.NewRetentionServiceClient(conn),
		health:    healthpb.NewHealthClient(conn),
	}, nil
}
