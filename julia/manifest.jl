# The manifest of a Daf data set, computed exactly as pydaf computes it (pydaf/manifest.py documents the format and the
# hash), so julia/verify.jl can check a data set against the manifest pydaf wrote for it, and pydaf's tests can check the
# data sets julia/make_fixtures.jl writes against the manifests written here. Included by those scripts (and by pydaf's
# tests into the juliacall bridge).
#
# The hash of a value is the SHA-256 of: the header "daf-manifest-1 <kind> <eltype> <dims>\n"; then strings as their
# UTF-8 bytes each followed by 0xFF, a number scalar as its little-endian bytes, and a number vector or matrix as
# (0-based column-major position as a little-endian UInt64, little-endian value) for every value != 0, in column-major
# (stored, for sparse data) order.

using DataAxesFormats
using JSON
using SHA
using SparseArrays

import NamedArrays

@assert ENDIAN_BOM == 0x04030201  # `write` writes little-endian bytes on this machine, which the hash is over

const MANIFEST_VERSION = 1
const MANIFEST_SEPARATOR = 0xff  # never occurs in UTF-8
const MANIFEST_CHUNK_BYTES = 1 << 24
const MANIFEST_SECTIONS = ("scalars" => 1, "axes" => 1, "vectors" => 2, "matrices" => 3)
const MANIFEST_FIELDS = ("eltype", "length", "shape", "nnz", "hash")

function manifest_eltype(element_type::Type)::String
    return element_type <: AbstractString ? "String" : string(element_type)
end

function manifest_array(array::AbstractArray)::AbstractArray
    while array isa NamedArrays.NamedArray || array isa SparseArrays.ReadOnly
        array = parent(array)
    end
    if issparse(array) && !(array isa SparseVector || array isa SparseMatrixCSC)  # e.g. lazy sparse (packed) data
        array = ndims(array) == 1 ? SparseVector(array) : SparseMatrixCSC(array)
    end
    return array
end

# The bytes to hash go to `buffer`, which is hashed every MANIFEST_CHUNK_BYTES, so no array is ever copied whole.
struct ManifestHasher
    context::SHA.SHA256_CTX
    buffer::IOBuffer
end

function ManifestHasher(kind::AbstractString, element_type::Type, dims::Tuple)::ManifestHasher
    hasher = ManifestHasher(SHA.SHA256_CTX(), IOBuffer())
    write(hasher.buffer, "daf-manifest-$(MANIFEST_VERSION) $(kind) $(manifest_eltype(element_type)) $(join(dims, ","))\n")
    return hasher
end

function flush_hasher!(hasher::ManifestHasher; force::Bool = false)::Nothing
    if force || position(hasher.buffer) >= MANIFEST_CHUNK_BYTES
        SHA.update!(hasher.context, take!(hasher.buffer))
    end
    return nothing
end

function finish_hasher!(hasher::ManifestHasher)::String
    flush_hasher!(hasher; force = true)
    return bytes2hex(SHA.digest!(hasher.context))
end

function hash_string!(hasher::ManifestHasher, value::AbstractString)::Nothing
    write(hasher.buffer, codeunits(value))
    write(hasher.buffer, MANIFEST_SEPARATOR)
    flush_hasher!(hasher)
    return nothing
end

function hash_entry!(hasher::ManifestHasher, position::Integer, value::Real)::Nothing
    if value != 0  # -0.0 is a zero, NaN is not
        write(hasher.buffer, UInt64(position))
        write(hasher.buffer, value)
    end
    return nothing
end

function manifest_scalar_hash(value::StorageScalar)::String
    hasher = ManifestHasher("scalar", typeof(value), ())
    if value isa AbstractString
        hash_string!(hasher, value)
    else
        write(hasher.buffer, value)
    end
    return finish_hasher!(hasher)
end

function manifest_axis_hash(entries::AbstractVector{<:AbstractString})::String
    hasher = ManifestHasher("axis", String, (length(entries),))
    for entry in entries
        hash_string!(hasher, entry)
    end
    return finish_hasher!(hasher)
end

function manifest_array_hash(kind::AbstractString, array::AbstractArray)::String
    array = manifest_array(array)
    hasher = ManifestHasher(kind, eltype(array), size(array))
    if eltype(array) <: AbstractString
        for value in array  # column-major
            hash_string!(hasher, value)
        end
    elseif array isa SparseVector
        for (index, value) in zip(SparseArrays.nonzeroinds(array), SparseArrays.nonzeros(array))
            hash_entry!(hasher, Int(index) - 1, value)
            flush_hasher!(hasher)
        end
    elseif array isa SparseMatrixCSC
        n_rows = size(array, 1)
        colptr = SparseArrays.getcolptr(array)
        rowval = SparseArrays.rowvals(array)
        nzval = SparseArrays.nonzeros(array)
        for column in 1:size(array, 2)
            for entry in Int(colptr[column]):(Int(colptr[column + 1]) - 1)
                hash_entry!(hasher, Int(rowval[entry]) - 1 + (column - 1) * n_rows, nzval[entry])
            end
            flush_hasher!(hasher)
        end
    else
        for (position, value) in enumerate(array)  # linear indices are column-major
            hash_entry!(hasher, position - 1, value)
            if position % 65536 == 0
                flush_hasher!(hasher)
            end
        end
    end
    return finish_hasher!(hasher)
end

function manifest_nnz(array::AbstractArray)::Int
    if eltype(array) <: AbstractString
        return count(!isempty, array)
    elseif issparse(array)
        return count(!iszero, SparseArrays.nonzeros(array))
    else
        return count(!iszero, array)
    end
end

function manifest_shown(value::AbstractString)::String
    return String(value)
end

function manifest_shown(value::Integer)::Integer  # Bool included
    return value
end

function manifest_shown(value::AbstractFloat)::String  # for people only: compared by hash
    return isnan(value) ? "NaN" : isinf(value) ? (value > 0 ? "Inf" : "-Inf") : repr(Float64(value))
end

function manifest_array_entry(kind::AbstractString, array::AbstractArray)::Dict{String, Any}
    array = manifest_array(array)
    is_sparse = !(eltype(array) <: AbstractString) && issparse(array)
    entry = Dict{String, Any}(
        "eltype" => manifest_eltype(eltype(array)),
        "storage" => is_sparse ? "sparse" : "dense",
        "nnz" => manifest_nnz(array),
        "hash" => manifest_array_hash(kind, array),
    )
    if kind == "vector"
        entry["length"] = length(array)
    else
        entry["shape"] = collect(size(array))
    end
    return entry
end

"""
    manifest_of(daf::DafReader)::Dict{String, Any}

The manifest of a data set, as `pydaf manifest` writes it (see pydaf/manifest.py).
"""
function manifest_of(daf::DafReader)::Dict{String, Any}
    scalars = Dict{String, Any}()
    for name in scalars_set(daf)
        value = get_scalar(daf, name)
        scalars[String(name)] = Dict{String, Any}(
            "eltype" => manifest_eltype(typeof(value)),
            "value" => manifest_shown(value),
            "hash" => manifest_scalar_hash(value),
        )
    end
    axes_names = sort!([String(axis) for axis in axes_set(daf)])
    axes = Dict{String, Any}()
    vectors = Dict{String, Any}()
    matrices = Dict{String, Any}()
    for axis in axes_names
        entries = axis_vector(daf, axis)
        axes[axis] = Dict{String, Any}("length" => length(entries), "hash" => manifest_axis_hash(entries))
        vectors[axis] = Dict{String, Any}(
            String(name) => manifest_array_entry("vector", get_vector(daf, axis, name)) for
            name in vectors_set(daf, axis)
        )
        matrices[axis] = Dict{String, Any}()
    end
    for rows_axis in axes_names
        for columns_axis in axes_names
            matrices[rows_axis][columns_axis] = Dict{String, Any}(
                String(name) =>
                    manifest_array_entry("matrix", get_matrix(daf, rows_axis, columns_axis, name; relayout = false))
                for name in matrices_set(daf, rows_axis, columns_axis; relayout = false, tensors = false)
            )
        end
    end
    return Dict{String, Any}(
        "manifest" => "daf-manifest",
        "version" => MANIFEST_VERSION,
        "name" => String(daf.name),
        "scalars" => scalars,
        "axes" => axes,
        "vectors" => vectors,
        "matrices" => matrices,
    )
end

function manifest_text(daf::DafReader)::String
    return JSON.json(manifest_of(daf))
end

function flatten_manifest(manifest::AbstractDict, section::AbstractString, depth::Integer)::Dict{String, Any}
    flat = Dict{String, Any}()
    function walk(prefix::AbstractString, node::AbstractDict, level::Integer)::Nothing
        for (key, child) in node
            if level == depth
                flat["$(prefix)/$(key)"] = child
            else
                walk("$(prefix)/$(key)", child, level + 1)
            end
        end
        return nothing
    end
    walk(section, get(manifest, section, Dict{String, Any}()), 1)
    return flat
end

"""
    manifest_differences(expected, actual; storage = true)::Vector{String}

What differs between two (parsed) manifests, one line per property, as pydaf's `manifest_differences` says it (data set
names ignored; with `storage`, dense/sparse storage compared too).
"""
function manifest_differences(expected::AbstractDict, actual::AbstractDict; storage::Bool = true)::Vector{String}
    for manifest in (expected, actual)
        if get(manifest, "manifest", nothing) != "daf-manifest" || get(manifest, "version", nothing) != MANIFEST_VERSION
            error("not a version $(MANIFEST_VERSION) daf manifest")
        end
    end
    fields = storage ? (MANIFEST_FIELDS..., "storage") : MANIFEST_FIELDS
    differences = String[]
    for (section, depth) in MANIFEST_SECTIONS
        left = flatten_manifest(expected, section, depth)
        right = flatten_manifest(actual, section, depth)
        append!(differences, ["$(path): missing" for path in sort!(collect(setdiff(keys(left), keys(right))))])
        append!(differences, ["$(path): unexpected" for path in sort!(collect(setdiff(keys(right), keys(left))))])
        for path in sort!(collect(intersect(keys(left), keys(right))))
            for field in fields
                if get(left[path], field, nothing) != get(right[path], field, nothing)
                    push!(differences, "$(path): $(field) differs")
                end
            end
        end
    end
    return differences
end
