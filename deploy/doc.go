// Package deploy holds the container image recipe (Dockerfile) and the
// Kubernetes manifests (kubernetes/) of metadatad. It has no code: its tests
// build the static binary the image ships, check that the manifests parse,
// pass only flags the binary has and reference only Secrets that exist,
// and run the purge CronJob's grpcurl command against a server started
// with the StatefulSet's own arguments.
package deploy
