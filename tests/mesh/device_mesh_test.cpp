#include "mesh/device_mesh.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "mesh_shapes.hpp"

namespace meshtp::mesh {
namespace {

TEST(DeviceMesh, RowMajorCoordinatesLastDimFastest) {
  const auto world = comm::Communicator::world();
  for (const auto& shape : meshes_for(world.size())) {
    const DeviceMesh mesh(world, shape);
    EXPECT_EQ(mesh.rank_of(mesh.coords()), world.rank());
    // Consecutive ranks differ in the last coordinate.
    if (world.rank() + 1 < world.size() && shape.back() > 1 &&
        mesh.coord(mesh.ndim() - 1) + 1 < shape.back()) {
      auto next = mesh.coords_of(world.rank() + 1);
      EXPECT_EQ(next.back(), mesh.coords().back() + 1);
    }
    for (int dim = 0; dim < mesh.ndim(); ++dim) {
      const comm::Communicator& group = mesh.dim_comm(dim);
      EXPECT_EQ(group.size(), shape[dim]);
      EXPECT_EQ(group.rank(), mesh.coord(dim));
      // Every member of my dim group differs from me only in coordinate `dim`.
      std::vector<int> mine = mesh.coords();
      std::vector<int> all(mine.size() * static_cast<std::size_t>(group.size()));
      group.all_gather(std::span<const int>(mine), std::span<int>(all));
      for (int m = 0; m < group.size(); ++m) {
        for (int k = 0; k < mesh.ndim(); ++k) {
          const int theirs = all[m * mesh.ndim() + k];
          EXPECT_EQ(theirs, k == dim ? m : mine[k]) << mesh << " dim " << dim;
        }
      }
    }
  }
}

TEST(DeviceMesh, FigureFourGroups) {
  const auto world = comm::Communicator::world();
  if (world.size() != 4) GTEST_SKIP() << "the (2,2) example needs 4 ranks";
  const DeviceMesh mesh(world, {2, 2});
  // Mesh dim 0 groups: {0,2} {1,3}; mesh dim 1 groups: {0,1} {2,3}.
  std::vector<int> me{world.rank()};
  std::vector<int> dim0(2);
  std::vector<int> dim1(2);
  mesh.dim_comm(0).all_gather(std::span<const int>(me), std::span<int>(dim0));
  mesh.dim_comm(1).all_gather(std::span<const int>(me), std::span<int>(dim1));
  EXPECT_EQ(dim0, (std::vector<int>{world.rank() % 2, world.rank() % 2 + 2}));
  EXPECT_EQ(dim1, (std::vector<int>{world.rank() / 2 * 2, world.rank() / 2 * 2 + 1}));
}

TEST(DeviceMesh, SubmeshKeepsTheChosenDims) {
  const auto world = comm::Communicator::world();
  for (const auto& shape : meshes_for(world.size())) {
    const DeviceMesh mesh(world, shape);
    const DeviceMesh last = mesh.submesh({mesh.ndim() - 1});
    EXPECT_EQ(last.shape(), std::vector<int>{shape.back()});
    EXPECT_EQ(last.rank(), mesh.coord(mesh.ndim() - 1));
    if (mesh.ndim() >= 2) {
      const DeviceMesh swapped = mesh.submesh({1, 0});
      EXPECT_EQ(swapped.shape(), (std::vector<int>{shape[1], shape[0]}));
      EXPECT_EQ(swapped.coord(0), mesh.coord(1));
      EXPECT_EQ(swapped.coord(1), mesh.coord(0));
    }
  }
}

TEST(DeviceMesh, SizeMismatchIsAClearError) {
  const auto world = comm::Communicator::world();
  const int n = world.size();
  try {
    DeviceMesh mesh(world, {n + 1, 2});
    FAIL() << "mesh of the wrong size accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("mesh {}x2 has {} ranks but the world has {}: choose mesh sizes whose "
                          "product is {}",
                          n + 1, 2 * (n + 1), n, n));
  }
  EXPECT_THROW(DeviceMesh(world, {}), Error);
  EXPECT_THROW(DeviceMesh(world, {0, n}), Error);
  // The world is still usable: the check ran before any collective.
  const DeviceMesh ok(world, {n});
  EXPECT_EQ(ok.dim_comm(0).size(), n);
}

}  // namespace
}  // namespace meshtp::mesh
