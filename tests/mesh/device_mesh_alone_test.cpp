// DeviceMesh::alone: one rank of a mesh played with no peer (`meshtp bench rank`). Its
// coordinates, every dim's group and every submesh are what the real mesh gives that rank,
// each group on the alone transport. No MPI.
#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "error_of.hpp"
#include "mesh/device_mesh.hpp"

namespace meshtp::mesh {
namespace {

TEST(DeviceMeshAlone, EveryRankOfA2x3MeshHasTheRealCoordinatesAndGroups) {
  for (int rank = 0; rank < 6; ++rank) {
    const DeviceMesh mesh = DeviceMesh::alone({2, 3}, rank);
    EXPECT_TRUE(mesh.is_alone());
    EXPECT_EQ(mesh.comm().rank(), rank);
    EXPECT_EQ(mesh.comm().size(), 6);
    EXPECT_EQ(mesh.coords(), mesh.coords_of(rank));
    EXPECT_EQ(mesh.rank_of(mesh.coords()), rank);
    for (int d = 0; d < 2; ++d) {
      const comm::Communicator& group = mesh.dim_comm(d);
      EXPECT_EQ(group.transport(), comm::TransportKind::kAlone);
      EXPECT_EQ(group.size(), mesh.shape()[d]);
      EXPECT_EQ(group.rank(), mesh.coords()[d]) << "rank " << rank << " dim " << d;
    }
    const DeviceMesh row = mesh.submesh({1});
    EXPECT_TRUE(row.is_alone());
    EXPECT_EQ(row.shape(), std::vector<int>{3});
    EXPECT_EQ(row.comm().rank(), mesh.coords()[1]);
  }
}

TEST(DeviceMeshAlone, DegenerateAndThreeDimMeshes) {
  const DeviceMesh one = DeviceMesh::alone({1, 1}, 0);
  EXPECT_EQ(one.dim_comm(0).size(), 1);
  const DeviceMesh cube = DeviceMesh::alone({2, 1, 4}, 7);
  EXPECT_EQ(cube.coords(), (std::vector<int>{1, 0, 3}));
  EXPECT_EQ(cube.dim_comm(2).rank(), 3);
}

TEST(DeviceMeshAlone, RefusesARankOutsideTheMesh) {
  EXPECT_NE(test_support::error_of([] { (void)DeviceMesh::alone({2, 2}, 4); })
                .find("rank 4 is outside mesh 2x2 (4 ranks)"),
            std::string::npos);
  EXPECT_NE(test_support::error_of([] { (void)DeviceMesh::alone({}, 0); }).find("at least one dim"),
            std::string::npos);
}

}  // namespace
}  // namespace meshtp::mesh
