// The CIFAR-10 and CIFAR-100 "binary version" files (https://www.cs.toronto.edu/~kriz/cifar.html):
// fixed-size records of label byte(s) then 3 x 32 x 32 pixel bytes, one colour plane after the
// other. CIFAR-10: one label byte (0-9); files data_batch_1.bin ... data_batch_5.bin and
// test_batch.bin. CIFAR-100: a coarse (0-19) then a fine (0-99) label byte, of which the fine
// one is used; files train.bin and test.bin.
#pragma once

#include <string>
#include <vector>

#include "data/dataset.hpp"

namespace tether {

enum class CifarVariant { cifar10, cifar100 };

// Reads the records of `paths` in order into one data set of 3 x 32 x 32 images stored HWC,
// pixels scaled to [0, 1] (not yet normalised). Throws std::runtime_error naming the file when
// it is missing, empty, not a whole number of records, or holds a label out of range.
std::shared_ptr<Dataset> read_cifar(const std::vector<std::string>& paths, CifarVariant variant);

// Normalises each channel of both sets by the training set's mean and standard deviation.
void normalize_channels(Dataset& train, Dataset& test);

// The training and test sets of `dir`, normalised (see the file names above).
TrainTestSplit load_cifar(const std::string& dir, CifarVariant variant);

}  // namespace tether
