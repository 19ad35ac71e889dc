# Write the Julia-side fixtures pydaf's tests read (tests/test_julia.py, the "kit" tests): one small data set holding
# every kind of property, written by Julia's DataAxesFormats as H5df, FilesDaf and ZarrDaf; Julia's manifest of each
# (julia/manifest.jl); and the results of Julia's queries on it.
#
#     julia --project=julia julia/make_fixtures.jl OUTPUT_DIRECTORY
#
# OUTPUT_DIRECTORY/ gets:
#   kit.h5df, kit.daf/ (FilesDaf), kit.daf.zarr/ (ZarrDaf)   the data set, as each format writes it
#   <data set>.manifest.json                                   Julia's manifest of it (opened read-only)
#   queries.json                                               {"records": [{"query", "result" | "error"}, ...]}
#   kit.json                                                   the index: data sets, formats, manifests, versions
# A query's "result" is {"kind": "names", "names"}, {"kind": "scalar", "eltype", "value"},
# {"kind": "vector", "eltype", "dim_name", "names", "values"} or {"kind": "matrix", "eltype", "row_dim_name",
# "col_dim_name", "rows", "cols", "values" (row-major)}; floats are written as strings (Julia's shortest text of the
# Float64 value, which Python's float() reads back exactly), a dim_name is null where the entries are not an axis.
# The results must be the same on the three formats (this script stops otherwise), so every data set is opened with
# the same name (`KIT_NAME`): Julia names a data set opened without one after its path, and every error message
# names the data set.

include(joinpath(@__DIR__, "manifest.jl"))

# Read-only, the data sets are named `kit!.read_only` (`read_only` appends `.read_only`; the `!` keeps `unique_name`
# from appending `#2`, `#3` to the later ones).
const KIT_NAME = "kit!"

function fill_kit!(daf::DafWriter)::DafWriter
    set_scalar!(daf, "organism", "human")
    set_scalar!(daf, "version", Int64(3))
    set_scalar!(daf, "ratio", Float32(0.25))
    set_scalar!(daf, "is_test", true)
    set_scalar!(daf, "count", UInt8(7))
    set_scalar!(daf, "largest", typemax(UInt64))
    set_scalar!(daf, "offset", Int16(-5))
    set_scalar!(daf, "precise", Float64(pi))

    add_axis!(daf, "cell", ["c1", "c2", "c3", "c4", "c5", "c6"])
    add_axis!(daf, "gene", ["g1", "g2", "g3", "g4"])
    add_axis!(daf, "type", ["T", "B", "NK"])
    add_axis!(daf, "donor", ["d1", "d2"])

    set_vector!(daf, "cell", "age", UInt8[31, 45, 0, 60, 22, 0])
    set_vector!(daf, "cell", "type", ["T", "B", "T", "NK", "", "B"])
    set_vector!(daf, "cell", "donor", ["d1", "d2", "d1", "d1", "d2", "d2"])
    set_vector!(daf, "cell", "score", SparseVector(6, UInt32[2, 5], Float32[1.5, -2.5]))
    set_vector!(daf, "cell", "is_doublet", [false, false, true, false, false, false])
    set_vector!(daf, "cell", "note", ["", "", "odd", "", "", ""])  # mostly empty: stored sparse by the file formats
    set_vector!(daf, "gene", "is_marker", [true, false, true, false])
    set_vector!(daf, "gene", "offset", Int32[-3, 0, 7, 2])
    set_vector!(daf, "type", "color", ["red", "green", "blue"])
    set_vector!(daf, "donor", "sex", ["male", "female"])

    umis = UInt16[
        0 3 0 1
        5 0 0 0
        0 0 2 0
        1 1 0 0
        0 0 0 0
        7 0 4 0
    ]
    set_matrix!(daf, "cell", "gene", "UMIs", sparse(umis))  # both layouts
    totals = max.(sum(Float32.(umis); dims = 2), 1.0f0)
    set_matrix!(daf, "cell", "gene", "fraction", Float32.(umis) ./ totals; relayout = false)
    labels = [(gene + cell) % 3 == 0 ? "" : "L$(gene).$(cell)" for gene in 1:4, cell in 1:6]
    set_matrix!(daf, "gene", "cell", "label", labels; relayout = false)
    set_matrix!(daf, "cell", "cell", "distance", Float64[abs(row - column) for row in 1:6, column in 1:6])
    weight = SparseMatrixCSC(3, 4, [1, 2, 3, 3, 4], [1, 2, 3], [0.0, 1.5, 2.5])  # an explicitly stored zero
    set_matrix!(daf, "type", "gene", "weight", weight; relayout = false)
    return daf
end

const KIT_QUERIES = [
    ". ?",
    "@ ?",
    "@ cell : ?",
    "@ cell @ gene :: ?",
    ". organism",
    ". ratio",
    ". largest",
    ". missing || 1.5 Float32",
    "@ cell",
    "@ cell : age",
    "@ cell [ age > 30 ] : age",
    "@ cell : age >> Sum",
    "@ cell : age >> Mean",
    "@ cell : score",
    "@ cell : score >> Sum",
    "@ cell : type ?? none : color",
    "@ cell : donor : sex",
    "@ cell : age / donor >> Sum",
    "@ cell : age / donor =@ >> Mean",
    "@ cell [ note != '' ] : note",
    "@ cell [ is_doublet ]",
    "@ gene [ ! is_marker ] : offset",
    ": age @ cell = c4",
    ":: UMIs @ cell = c1 @ gene = g2",
    "@ cell @ gene :: UMIs",
    "@ cell @ gene :: UMIs >| Sum",
    "@ cell @ gene :: UMIs >- Max",
    "@ cell @ gene :: UMIs >> Sum type Int64",
    "@ gene @ cell :: UMIs % Log base 2 eps 1",
    "@ cell @ gene :: fraction -/ donor >- Mean",
    "@ cell : donor * is_doublet",
    "@ cell :: distance @| c2",
    "@ type @ gene :: weight",
    "@ gene @ cell :: label",
    "@ cell : nothing_here",
]

json_value(value::AbstractFloat)::String = string(Float64(value))
json_value(value::AbstractString)::String = String(value)
json_value(value::Integer)::Integer = value  # Bool included

function dim_json(array::NamedArrays.NamedArray, dimension::Integer)::Union{String, Nothing}
    name = NamedArrays.dimnames(array, dimension)
    return name isa Symbol && String(name) in ("A", "B") ? nothing : String(name)  # NamedArrays' default names
end

function result_json(result::Any)::Dict{String, Any}
    if result isa AbstractSet
        return Dict{String, Any}("kind" => "names", "names" => sort!([String(name) for name in result]))
    elseif result isa AbstractString || result isa Real
        return Dict{String, Any}(
            "kind" => "scalar",
            "eltype" => manifest_eltype(typeof(result)),
            "value" => json_value(result),
        )
    elseif result isa NamedArrays.NamedArray && ndims(result) == 1
        return Dict{String, Any}(
            "kind" => "vector",
            "eltype" => manifest_eltype(eltype(result)),
            "dim_name" => dim_json(result, 1),
            "names" => [String(name) for name in names(result, 1)],
            "values" => [json_value(value) for value in result],
        )
    elseif result isa NamedArrays.NamedArray && ndims(result) == 2
        return Dict{String, Any}(
            "kind" => "matrix",
            "eltype" => manifest_eltype(eltype(result)),
            "row_dim_name" => dim_json(result, 1),
            "col_dim_name" => dim_json(result, 2),
            "rows" => [String(name) for name in names(result, 1)],
            "cols" => [String(name) for name in names(result, 2)],
            "values" => [[json_value(result[row, column]) for column in 1:size(result, 2)] for row in 1:size(result, 1)],
        )
    end
    return error("unexpected query result type: $(typeof(result))")
end

function query_record(daf::DafReader, query::AbstractString)::Dict{String, Any}
    try
        return Dict{String, Any}("query" => query, "result" => result_json(get_query(daf, query; cache = false)))
    catch error
        return Dict{String, Any}("query" => query, "error" => sprint(showerror, error))
    end
end

function main(arguments::AbstractVector{<:AbstractString})::Int
    if length(arguments) != 1
        println(stderr, "usage: julia --project=julia julia/make_fixtures.jl OUTPUT_DIRECTORY")
        return 2
    end
    check_python_float_text()
    output = abspath(arguments[1])
    mkpath(output)
    data_sets = Dict{String, Any}[]
    records = nothing
    for (name, format) in (("kit.h5df", "H5df"), ("kit.daf", "FilesDaf"), ("kit.daf.zarr", "ZarrDaf"))
        path = joinpath(output, name)
        open_format = getfield(DataAxesFormats, Symbol(format))
        fill_kit!(open_format(path, "w"; name = KIT_NAME))
        daf = open_format(path, "r"; name = KIT_NAME)
        manifest_name = "$(name).manifest.json"
        write(joinpath(output, manifest_name), manifest_text(daf))
        push!(data_sets, Dict{String, Any}("path" => name, "format" => format, "manifest" => manifest_name))
        format_records = [query_record(daf, query) for query in KIT_QUERIES]
        if records === nothing
            records = format_records
        elseif JSON.json(format_records) != JSON.json(records)
            error("the queries give different results on: $(path)")
        end
        println("wrote: $(path)")
    end
    write(joinpath(output, "queries.json"), JSON.json(Dict{String, Any}("data_set" => "kit", "records" => records)))
    index = Dict{String, Any}(
        "data_sets" => data_sets,
        "queries" => "queries.json",
        "julia_version" => string(VERSION),
        "daf_version" => string(pkgversion(DataAxesFormats)),
    )
    write(joinpath(output, "kit.json"), JSON.json(index))
    println("wrote: $(joinpath(output, "kit.json"))")
    return 0
end

exit(main(ARGS))
