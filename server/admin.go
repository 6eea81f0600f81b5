package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store/pebble/backup"
)

// backupChunk is the most data one BackupResponse carries: well under the
// 4 MiB clients accept by default.
const backupChunk = 1 << 20

// adminService serves metadata.v1.AdminService.
type adminService struct {
	metadatav1.UnimplementedAdminServiceServer
	// backups takes snapshots of the embedded store; nil on Azure.
	backups *backup.Source
	log     *slog.Logger
	// stopping is closed when the server shuts down: a backup in progress
	// ends then rather than hold the shutdown.
	stopping <-chan struct{}
}

func (s *adminService) Backup(_ *metadatav1.BackupRequest, stream grpc.ServerStreamingServer[metadatav1.BackupResponse]) error {
	ctx := stream.Context()
	if s.backups == nil {
		return status.Error(codes.FailedPrecondition, "backups are of the embedded store, and this server runs on Azure Table Storage, "+
			"whose data lives in the storage account, not in files of this server")
	}
	snap, err := s.backups.Take(ctx)
	if err != nil {
		return toStatus(ctx, s.log, err)
	}
	defer func() {
		if err := snap.Remove(); err != nil {
			s.log.WarnContext(ctx, "backup: removing the snapshot failed; the next backup removes it", "err", err)
		}
	}()
	if err := stream.Send(&metadatav1.BackupResponse{Manifest: manifestToProto(&snap.Manifest)}); err != nil {
		return err
	}
	buf := make([]byte, backupChunk)
	for _, f := range snap.Manifest.Files {
		if err := s.sendFile(stream, snap, f, buf); err != nil {
			return err
		}
	}
	s.log.InfoContext(ctx, "backup sent", "files", len(snap.Manifest.Files), "bytes", snap.Manifest.TotalBytes())
	return nil
}

// sendFile streams one file of the snapshot in chunks; an empty file is
// one empty chunk, so the client sees every file.
func (s *adminService) sendFile(stream grpc.ServerStreamingServer[metadatav1.BackupResponse], snap *backup.Snapshot, f backup.File, buf []byte) error {
	ctx := stream.Context()
	file, err := snap.Open(f)
	if err != nil {
		return toStatus(ctx, s.log, err)
	}
	defer file.Close()
	var offset int64
	for {
		select {
		case <-s.stopping:
			return status.Error(codes.Unavailable, "server shutting down; take the backup again")
		default:
		}
		n, err := io.ReadFull(file, buf)
		if n > 0 || offset == 0 {
			chunk := &metadatav1.BackupChunk{File: f.Name, Offset: offset, Data: buf[:n]}
			if err := stream.Send(&metadatav1.BackupResponse{Chunk: chunk}); err != nil {
				return err
			}
			offset += int64(n)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			if offset != f.Size {
				return toStatus(ctx, s.log, fmt.Errorf("backup: file %s changed while it was sent: %d bytes, %d in the manifest", f.Name, offset, f.Size))
			}
			return nil
		}
		if err != nil {
			return toStatus(ctx, s.log, err)
		}
	}
}

func manifestToProto(m *backup.Manifest) *metadatav1.BackupManifest {
	files := make([]*metadatav1.BackupFile, len(m.Files))
	for i, f := range m.Files {
		files[i] = &metadatav1.BackupFile{Name: f.Name, SizeBytes: f.Size, Sha256: f.SHA256}
	}
	return &metadatav1.BackupManifest{
		FormatVersion: int32(m.FormatVersion), Engine: m.Engine, CreateTime: timestamppb.New(m.Created),
		Tables: m.Tables, Files: files, TotalBytes: m.TotalBytes(),
	}
}

// BackupManifestFromProto is the manifest a Backup stream's first message
// carries, for the client writing the backup.
func BackupManifestFromProto(m *metadatav1.BackupManifest) backup.Manifest {
	out := backup.Manifest{FormatVersion: int(m.GetFormatVersion()), Engine: m.GetEngine(),
		Created: m.GetCreateTime().AsTime(), Tables: m.GetTables()}
	for _, f := range m.GetFiles() {
		out.Files = append(out.Files, backup.File{Name: f.GetName(), Size: f.GetSizeBytes(), SHA256: f.GetSha256()})
	}
	return out
}
