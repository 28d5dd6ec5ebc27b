#include "mesh/device_mesh.hpp"

#include <ostream>

#include "core/error.hpp"
#include "core/parse.hpp"

namespace meshtp::mesh {
namespace {

std::int64_t product(const std::vector<int>& shape) {
  std::int64_t n = 1;
  for (const int d : shape) n *= d;
  return n;
}

}  // namespace

DeviceMesh DeviceMesh::alone(std::vector<int> shape, int rank) {
  MESHTP_CHECK(!shape.empty(), "a device mesh needs at least one dim");
  const std::int64_t n = product(shape);
  MESHTP_CHECK(n >= 1 && rank >= 0 && rank < n, "rank {} is outside mesh {} ({} ranks)", rank,
               format_mesh_shape(shape), n);
  const std::string label = "alone mesh " + format_mesh_shape(shape);
  return DeviceMesh(comm::Communicator::alone(rank, static_cast<int>(n), label), std::move(shape));
}

DeviceMesh::DeviceMesh(comm::Communicator comm, std::vector<int> shape)
    : comm_(std::move(comm)), shape_(std::move(shape)) {
  MESHTP_CHECK(!shape_.empty(), "a device mesh needs at least one dim");
  for (std::size_t i = 0; i < shape_.size(); ++i) {
    MESHTP_CHECK(shape_[i] >= 1, "mesh {} has size {} in dim {}; sizes must be at least 1",
                 format_mesh_shape(shape_), shape_[i], i);
  }
  MESHTP_CHECK(product(shape_) == comm_.size(),
               "mesh {} has {} ranks but the world has {}: choose mesh sizes whose product is {}",
               format_mesh_shape(shape_), product(shape_), comm_.size(), comm_.size());
  coords_ = coords_of(comm_.rank());
  // Group of dim i: ranks equal in every other coordinate. Color = this rank's linear index
  // with coordinate i zeroed (unique per group); key = coordinate i, so the group rank is it.
  // Labels name the group in watchdog errors: "mesh 2x2 dim 1 (within mesh 2x2x2 dims 1,2)".
  const std::string within =
      comm_.label().rfind("mesh ", 0) == 0 ? " (within " + comm_.label() + ")" : "";
  for (int i = 0; i < ndim(); ++i) {
    std::vector<int> base = coords_;
    base[i] = 0;
    std::string label = fmt::format("{} dim {}{}", to_string(), i, within);
    dim_comms_.push_back(is_alone() ? comm_.alone_group(coords_[i], shape_[i], std::move(label))
                                    : comm_.split(rank_of(base), coords_[i], std::move(label)));
    // The traffic counter files what moves along dim i under i (3-D meshes at most).
    if (i + 1 < comm::CommLedger::kLabels) dim_comms_.back().set_traffic_label(i);
  }
}

int DeviceMesh::size(int dim) const {
  MESHTP_CHECK(dim >= 0 && dim < ndim(), "mesh dim {} does not exist in {}", dim, to_string());
  return shape_[dim];
}

int DeviceMesh::coord(int dim) const {
  MESHTP_CHECK(dim >= 0 && dim < ndim(), "mesh dim {} does not exist in {}", dim, to_string());
  return coords_[dim];
}

std::vector<int> DeviceMesh::coords_of(int rank) const {
  MESHTP_CHECK(rank >= 0 && rank < size(), "rank {} is outside {}", rank, to_string());
  std::vector<int> coords(shape_.size());
  for (int i = ndim() - 1; i >= 0; --i) {
    coords[i] = rank % shape_[i];
    rank /= shape_[i];
  }
  return coords;
}

int DeviceMesh::rank_of(const std::vector<int>& coords) const {
  MESHTP_CHECK(coords.size() == shape_.size(), "{} coordinates for a {}-d mesh", coords.size(),
               ndim());
  int rank = 0;
  for (int i = 0; i < ndim(); ++i) {
    MESHTP_CHECK(coords[i] >= 0 && coords[i] < shape_[i],
                 "coordinate {} is outside mesh dim {} of size {}", coords[i], i, shape_[i]);
    rank = rank * shape_[i] + coords[i];
  }
  return rank;
}

const comm::Communicator& DeviceMesh::dim_comm(int dim) const {
  MESHTP_CHECK(dim >= 0 && dim < ndim(), "mesh dim {} does not exist in {}", dim, to_string());
  return dim_comms_[static_cast<std::size_t>(dim)];
}

DeviceMesh DeviceMesh::submesh(const std::vector<int>& dims) const {
  std::vector<bool> kept(shape_.size(), false);
  std::vector<int> sub_shape;
  for (const int d : dims) {
    MESHTP_CHECK(d >= 0 && d < ndim() && !kept[d], "submesh dims must be distinct dims of {}",
                 to_string());
    kept[d] = true;
    sub_shape.push_back(shape_[d]);
  }
  // Color: linear index of the dropped coordinates; key: row-major index in the kept dims.
  int color = 0;
  int key = 0;
  for (int i = 0; i < ndim(); ++i) {
    if (!kept[i]) color = color * shape_[i] + coords_[i];
  }
  for (const int d : dims) key = key * shape_[d] + coords_[d];
  std::string label = to_string() + " dims";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    label += i ? ',' : ' ';
    label += std::to_string(dims[i]);
  }
  if (is_alone()) {
    const int sub_ranks = static_cast<int>(product(sub_shape));  // before sub_shape moves
    return DeviceMesh(comm_.alone_group(key, sub_ranks, std::move(label)), std::move(sub_shape));
  }
  return DeviceMesh(comm_.split(color, key, std::move(label)), std::move(sub_shape));
}

std::string DeviceMesh::to_string() const { return "mesh " + format_mesh_shape(shape_); }

std::ostream& operator<<(std::ostream& os, const DeviceMesh& mesh) {
  return os << mesh.to_string();
}

}  // namespace meshtp::mesh
