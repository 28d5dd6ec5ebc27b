// DeviceMesh: the world's ranks arranged as an N-dimensional grid (ATP §3.1).
//
//   DeviceMesh(d0, …, dn-1) over N = Π di ranks. Rank r has row-major coordinates: the LAST
//   mesh dim varies fastest, so it holds consecutive ranks — usually the GPUs of one node.
//   Mesh dim i has N/di groups, each the di ranks that differ only in coordinate i; this
//   rank's group is dim_comm(i), in which its rank equals coord(i).
//
//   Example, mesh (2, 3):        dim 0 groups (columns)   dim 1 groups (rows)
//       rank 0 1 2  → (0,0) (0,1) (0,2)    {0,3} {1,4} {2,5}        {0,1,2} {3,4,5}
//            3 4 5  → (1,0) (1,1) (1,2)
//
// The per-dim communicators are built once, in the constructor (a collective call).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace meshtp::mesh {

class DeviceMesh {
 public:
  // Throws meshtp::Error if Π shape differs from comm.size() ("mesh 2x3 has 6 ranks but the
  // world has 4") or any size is < 1. Collective over comm.
  DeviceMesh(comm::Communicator comm, std::vector<int> shape);
  // On an alone communicator (comm/communicator.hpp TransportKind::kAlone) the mesh is played
  // alone: this rank's coordinates and groups are the real mesh's, every group (each dim's,
  // submeshes') an alone group, so the layers run this rank's share with no peer.
  //
  // Rank `rank` of the mesh, played alone (the same, from the shape). Not collective.
  static DeviceMesh alone(std::vector<int> shape, int rank);
  bool is_alone() const { return comm_.runs_alone(); }

  int ndim() const { return static_cast<int>(shape_.size()); }
  const std::vector<int>& shape() const { return shape_; }
  int size(int dim) const;  // mesh dim size
  int size() const { return comm_.size(); }
  int rank() const { return comm_.rank(); }
  const std::vector<int>& coords() const { return coords_; }
  int coord(int dim) const;

  std::vector<int> coords_of(int rank) const;
  int rank_of(const std::vector<int>& coords) const;

  const comm::Communicator& comm() const { return comm_; }
  // Group of ranks differing from this one only in coordinate `dim`.
  const comm::Communicator& dim_comm(int dim) const;

  // The mesh over the given dims (in the given order) among the ranks that share this
  // rank's coordinates in every other dim. submesh({1}) of a (2,3) mesh is the 3-rank row.
  // Collective over the whole mesh.
  DeviceMesh submesh(const std::vector<int>& dims) const;

  std::string to_string() const;  // "mesh 2x3"

 private:
  comm::Communicator comm_;
  std::vector<int> shape_;
  std::vector<int> coords_;
  std::vector<comm::Communicator> dim_comms_;
};

std::ostream& operator<<(std::ostream& os, const DeviceMesh& mesh);

}  // namespace meshtp::mesh
