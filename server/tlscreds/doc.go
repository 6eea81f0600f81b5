// Package tlscreds makes metadatad's TLS server credentials from PEM files
// that are read again while the server runs, so a renewed certificate or
// client CA takes effect on new connections without a restart. It builds on
// grpc-go's certprovider/pemfile, which polls the files (and so also sees
// Kubernetes swapping a Secret volume's ..data symlink), and on
// security/advancedtls, which serves what the providers hold.
package tlscreds
